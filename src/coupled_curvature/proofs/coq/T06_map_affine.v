(* T6 from a map φ: "the construction cannot be extended", with φ and its derivatives in the statement.
   For φ : Rⁿ → Rⁿ (n >= 1) with Jacobian field Jf and second-derivative field Kf (Kf x k = ∇²φ_k(x)),
   given as mathcomp-analysis directional derivatives at the points of a radial segment
   { t·u : a <= t <= b }, 0 < a, u <> 0:
     - ∂_d φ_k (t u) = (Jf(t u) d)_k for every direction d and coordinate k,
     - ∂_d (y ↦ (Jf(y) d')_k) (t u) = dᵀ Kf(t u)_k d' for all d, d',
     - Jf(t u) invertible and φ(t u) <> 0 (so that D is defined on both sides),
     - D at (t u, Jᵀg, JᵀHJ + Σ_k g_k K_k) equals D at (φ(t u), g, H) for every g <> 0 and symmetric H
       (the gradient and Hessian of L∘φ by the chain rule),
   map_ray_affine_conformal proves that φ is affine conformal on the segment:
     φ(t u) = c·Q·(t u) + β·Q u   with c > 0, QᵀQ = 1,
   so it maps the segment onto a segment of a line through the origin.  The proof applies
   pointwise_core at every point of the segment (w'ᵀK_k w' = 0 gives a zero second derivative along
   the ray, Jw' ∥ φ(w'), Jᵀ conformal), then cst_between of T06_n1_classification (zero derivative on a
   segment ⇒ constant) coordinatewise, twice.
   Not proved here: the same conclusion on an open set of Rⁿ.  pointwise_core gives the second
   derivative of φ only along w' itself (w'ᵀK_k w' = 0), so the argument is per ray; joining the rays
   needs more than the 1-D machinery.
   Instances: φ(v) = 2·R₉₀·v (a quarter turn, conformal) meets every hypothesis on the ray through e_0
   for 1 <= t <= 2 and the theorem applies to it; the non-conformal diag(2, 1) (T4's A21) moves D from
   1 to 4 at w' = e_0 with g = e_1, H = I; the non-affine φ(v) = v + v₀²·e_0 moves D from 0 to 2/9
   at w' = e_0 with g = e_0, H = 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive realfun.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic Common T01_analytic T04_invariance_group T06_no_nonlinear_extension T06_n1_classification.
Import numFieldTopology.Exports numFieldNormedType.Exports.

Section MapRay.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Lemma is_derive_ray (f : V -> R^o) (u : V) (t df : R) :
  is_derive (t *: u) u f df -> is_derive t 1 (fun s : R => f (s *: u)) df.
Proof.
case=> D1 D2.
have E : (fun h : R => h^-1 *: (((fun s : R => f (s *: u)) \o shift t) (h *: 1) - f (t *: u)))
       = (fun h : R => h^-1 *: ((f \o shift (t *: u)) (h *: u) - f (t *: u))).
  by apply/funext => h /=; rewrite scalerDl [h *: 1]mulr1.
have Dv : derivable (fun s : R => f (s *: u)) t 1 by rewrite /derivable E.
by apply: DeriveDef => //; rewrite /derive E.
Qed.

Lemma is_derive_dq (f : V -> R^o) (x v : V) (df : R) :
  (\forall h \near (0 : R^o)^', h^-1 *: ((f \o shift x) (h *: v) - f x) = df) -> is_derive x v f df.
Proof.
move=> E.
have C : (fun h : R => h^-1 *: ((f \o shift x) (h *: v) - f x)) @ (0 : R^o)^' --> (df : R^o).
  exact: cvg_near_cst.
have Dv : derivable f x v by apply/cvg_ex; exists (df : R^o).
apply: DeriveDef => //; rewrite /derive; exact: cvg_lim C.
Qed.


(* a linear map's coordinates: the difference quotient is (M d)_k exactly *)
Lemma is_derive_linear_coord (M : 'M[R]_n.+1) (k : 'I_n.+1) (x d : V) :
  is_derive x d (fun y : V => ((M *m y) k 0 : R^o)) ((M *m d) k 0).
Proof.
apply: is_derive_dq; move: (near_neq0 R); apply: filterS => h h0 /=.
rewrite mulmxDr -scalemxAr !mxE addrK.
by rewrite [_ *: _]mulrA mulVf // mul1r.
Qed.

Lemma is_derive_cst_coord (c x d : V) (k : 'I_n.+1) :
  is_derive x d (fun _ : V => (c k 0 : R^o)) 0.
Proof. exact: is_derive_cst. Qed.

Lemma quadZ (H : 'M[R]_n.+1) (t : R) (w : 'cV[R]_n.+1) : quad H (t *: w) = t ^+ 2 * quad H w.
Proof. by rewrite /quad -scalemxAr dotZl dotZr mulrA expr2. Qed.


Theorem map_ray_affine_conformal (phi : V -> V) (Jf : V -> 'M[R]_n.+1)
    (Kf : V -> 'I_n.+1 -> 'M[R]_n.+1) (u : V) (a b : R) :
  0 < a -> a <= b -> u != 0 ->
  (forall t, a <= t <= b -> forall (k : 'I_n.+1) (d : V),
     is_derive (t *: u) d (fun y : V => (phi y k 0 : R^o)) ((Jf (t *: u) *m d) k 0)) ->
  (forall t, a <= t <= b -> forall (k : 'I_n.+1) (d d' : V),
     is_derive (t *: u) d (fun y : V => ((Jf y *m d') k 0 : R^o)) (dot d (Kf (t *: u) k *m d'))) ->
  (forall t, a <= t <= b -> Jf (t *: u) \in unitmx) ->
  (forall t, a <= t <= b -> phi (t *: u) != 0) ->
  (forall t, a <= t <= b -> forall (g : 'cV[R]_n.+1) (H : 'M[R]_n.+1), g != 0 -> H^T = H ->
     coupledD (t *: u) ((Jf (t *: u))^T *m g)
       ((Jf (t *: u))^T *m H *m Jf (t *: u) + \sum_k g k 0 *: Kf (t *: u) k)
     = coupledD (phi (t *: u)) g H) ->
  exists (c : R) (Q : 'M[R]_n.+1) (beta : R),
    [/\ 0 < c, Q^T *m Q = 1%:M &
      forall t, a <= t <= b -> phi (t *: u) = c *: (Q *m (t *: u)) + beta *: (Q *m u)].
Proof.
move=> a0 ab u0 HJ HK Ju Pn DI.
have aab : a <= a <= b by rewrite Order.POrderTheory.lexx ab.
have tpos t : a <= t <= b -> 0 < t.
  by case/andP=> ta _; exact: Order.POrderTheory.lt_le_trans a0 ta.
have tu0 t : a <= t <= b -> t *: u != 0.
  by move=> T; rewrite scaler_eq0 negb_or u0 andbT (lt0r_neq0 (tpos t T)).
have core t (T : a <= t <= b) := pointwise_core (Ju t T) (tu0 t T) (Pn t T) (DI t T).
have Ku t k : a <= t <= b -> quad (Kf (t *: u) k) u = 0.
  move=> T; have [K0 _ _] := core t T; have := K0 k; rewrite quadZ => /eqP.
  by rewrite mulf_eq0 expf_eq0 /= (negbTE (lt0r_neq0 (tpos t T))) /= => /eqP.
pose phik k (s : R) := phi (s *: u) k 0.
pose dphik k (s : R) := (Jf (s *: u) *m u) k 0.
have D1 k z : a <= z <= b -> is_derive z 1 (phik k) (dphik k z).
  by move=> Z; exact: (is_derive_ray (HJ z Z k u)).
have D2 k z : a <= z <= b -> is_derive z 1 (dphik k) 0.
  by move=> Z; apply: is_derive_eq (is_derive_ray (HK z Z k u u)) _; exact: Ku.
have Cst k s : a <= s <= b -> dphik k s = dphik k a.
  case/andP=> sa sb; apply: cst_between => // z az zs; apply: D2.
  by rewrite az /=; exact: Order.POrderTheory.le_trans zs sb.
have Aff k s : a <= s <= b -> phik k s = phik k a + dphik k a * (s - a).
  move=> S; case/andP: (S) => sa sb.
  have P z : a <= z -> z <= s -> is_derive z 1 (phik k - (fun y => dphik k a * y + 0)) 0.
    move=> az zs; have Z : a <= z <= b by rewrite az (Order.POrderTheory.le_trans zs sb).
    apply: is_derive_eq (is_deriveB (D1 k z Z) (is_derive_affine _ _ _)) _.
    by rewrite (Cst k z Z) subrr.
  move: (cst_between sa P) => E.
  have {E} : phik k s - (dphik k a * s + 0) = phik k a - (dphik k a * a + 0) := E.
  by rewrite !addr0 => /eqP; rewrite subr_eq => /eqP ->; ring.
have Vec s : a <= s <= b -> phi (s *: u) = phi (a *: u) + (s - a) *: (Jf (a *: u) *m u).
  move=> S; apply/matrixP => i j; rewrite (ord1 j) addmx_entry scalemx_entry.
  by have := Aff i s S; rewrite /phik /dphik => ->; rewrite mulrC.
have [_ [lam Jl] [al [al0 JJ]]] := core a aab.
rewrite trmxK in JJ.
set J := Jf (a *: u) in Vec Jl JJ.
have al0' : al != 0 := lt0r_neq0 al0.
have QQt : (al^-1 *: J) *m (al^-1 *: J)^T = 1%:M.
  rewrite -scalemxAl linearZ /= -scalemxAr JJ scalerA scale_scalar_mx.
  by rewrite -expr2 exprVn mulVf ?expf_neq0.
have lam0 : lam != 0.
  apply/eqP => l0; move: Jl; rewrite l0 scale0r => /eqP; apply/negP.
  by rewrite -scalemxAr scaler_eq0 negb_or (lt0r_neq0 a0) /=; apply: contraNneq u0 => Ju0;
     rewrite -(mulKmx (Ju a aab) u) -/J Ju0 mulmx0.
have Pa : phi (a *: u) = (lam^-1 * a) *: (J *m u).
  by rewrite -scalerA scalemxAr Jl scalerA mulVf // scale1r.
exists al, (al^-1 *: J), ((lam^-1 * a - a) * al); split => //.
  exact: mulmx1C.
move=> s S; rewrite (Vec s S) Pa -!scalemxAl -!scalemxAr !scalerA -!scalerDl.
by congr (_ *: _); rewrite divff // mul1r mulfK //; ring.
Qed.

End MapRay.

(* a conformal J with K = 0 keeps D at every w' <> 0, through T4 *)
Lemma conformal_Dinv (R : rcfType) (n : nat) (J : 'M[R]_n) (w : 'cV[R]_n) :
  conformal J -> w != 0 -> Dinv J (fun _ => 0) w (J *m w).
Proof.
move=> cJ w0 g H g0 HH; have Ju := conformal_unit cJ.
have inv := iffRL (T4_i_iii Ju) cJ.
rewrite big1 => [|k _]; last exact: scaler0.
rewrite addr0 -(inv w (J^T *m g) (J^T *m H *m J)) //.
- congr coupledD; rewrite /act_g /act_H.
    by rewrite mulmxA -trmx_mul mulmxV // trmx1 mul1mx.
  by rewrite !mulmxA -trmx_mul mulmxV // trmx1 mul1mx -mulmxA mulmxV // mulmx1.
- exact: trmx_mul_e_neq0.
- by rewrite !trmx_mul trmxK HH mulmxA.
Qed.

Section MapInstances.
Variable R : realType.
Local Notation V2 := (matrix_normedModType R 1 0).

(* the rotation by a quarter turn *)
Definition rot90 : 'M[R]_2 := \matrix_(i, j) (if i == j then 0 else if i == 0 then -1 else 1).

Lemma rot90_orth : rot90^T *m rot90 = 1%:M /\ rot90 != 1%:M.
Proof.
split.
  apply/matrixP => i j; rewrite !mxE !big_ord_recl big_ord0 !mxE.
  by case: i => [[|[|//]] ?]; case: j => [[|[|//]] ?] /=; rewrite /= ?mulr0 ?mul0r ?mulrNN ?mulr1 ?addr0 ?add0r.
apply/negP => /eqP/(congr1 (fun M : 'M[R]_2 => M 0 0)); rewrite !mxE /=.
by move/eqP; rewrite eq_sym oner_eq0.
Qed.

Definition J_rot : 'M[R]_2 := 2 *: rot90.

Lemma J_rot_conformal : conformal J_rot.
Proof.
exists 2; split; first by rewrite ltr0n.
rewrite /J_rot linearZ /= linearZ /= -scalemxAl scalerA (proj1 rot90_orth) scale_scalar_mx.
by rewrite mulr1 expr2.
Qed.

(* φ(v) = 2·R₉₀·v (Jacobian 2·R₉₀, second derivatives 0) meets every hypothesis of
   map_ray_affine_conformal on the ray through e_0, for 1 <= t <= 2 *)
Lemma map_ray_affine_instance :
  [/\ forall t : R, 1 <= t <= 2 -> forall (k : 'I_2) (d : V2),
        is_derive (t *: e 0) d (fun y : V2 => ((J_rot *m y) k 0 : R^o)) ((J_rot *m d) k 0),
      forall t : R, 1 <= t <= 2 -> forall (k : 'I_2) (d d' : V2),
        is_derive (t *: e 0) d (fun _ : V2 => ((J_rot *m d') k 0 : R^o)) (dot d (0 *m d')),
      J_rot \in unitmx /\ rot90 != 1%:M,
      forall t : R, 1 <= t <= 2 -> J_rot *m (t *: e 0) != 0
    & forall t : R, 1 <= t <= 2 -> forall (g : 'cV[R]_2) (H : 'M[R]_2), g != 0 -> H^T = H ->
        coupledD (t *: e 0) (J_rot^T *m g) (J_rot^T *m H *m J_rot + \sum_k g k 0 *: (0 : 'M[R]_2))
        = coupledD (J_rot *m (t *: e 0)) g H].
Proof.
have Ju := conformal_unit J_rot_conformal.
have te0 (t : R) : 1 <= t <= 2 -> t *: (e 0 : 'cV[R]_2) != 0.
  case/andP=> t1 _; rewrite scaler_eq0 negb_or e_neq0 andbT.
  by apply: lt0r_neq0; exact: Order.POrderTheory.lt_le_trans ltr01 t1.
split.
- by move=> t _ k d; exact: is_derive_linear_coord.
- move=> t _ k d d'; have -> : dot d (0 *m d') = 0 by rewrite mul0mx /dot mulmx0 mxE.
  exact: (is_derive_cst_coord (J_rot *m d') _ _ k).
- by split => //; exact: (proj2 rot90_orth).
- move=> t T; apply: contraNneq (te0 t T) => h.
  by rewrite -(mulKmx Ju (t *: e 0)) h mulmx0.
- by move=> t T; exact: conformal_Dinv J_rot_conformal (te0 t T).
Qed.

(* and the theorem applies to it *)
Lemma map_ray_affine_instance_applies :
  exists (c : R) (Q : 'M[R]_2) (beta : R),
    [/\ 0 < c, Q^T *m Q = 1%:M &
      forall t, 1 <= t <= 2 -> J_rot *m (t *: e 0) = c *: (Q *m (t *: e 0)) + beta *: (Q *m e 0)].
Proof.
have [H1 H2 [Ju _] H4 H5] := map_ray_affine_instance.
apply: (@map_ray_affine_conformal R 1 (fun y : V2 => J_rot *m y) (fun _ => J_rot) (fun _ _ => 0)
          (e 0) 1 2) => //.
- exact: ltr01.
- by rewrite ler1n.
- exact: e_neq0.
Qed.


(* the non-conformal linear map φ(v) = diag(2, 1)·v (T4's A21; Jacobian A21, second derivatives 0):
   at w' = e_0 with g = e_1, H = I the pulled-back D is 4 and D at φ(e_0) = 2e_0 is 1 *)
Lemma map_ray_nonconformal_instance :
  [/\ forall (k : 'I_2) (d : V2),
        is_derive (e 0 : V2) d (fun y : V2 => ((A21 R *m y) k 0 : R^o)) ((A21 R *m d) k 0),
      ~ conformal (A21 R),
      coupledD (e 0) ((A21 R)^T *m e 1)
        ((A21 R)^T *m 1%:M *m A21 R + \sum_k (e 1 : 'cV[R]_2) k 0 *: (0 : 'M[R]_2)) = 4
    & coupledD (A21 R *m e 0) (e 1) 1%:M = 1].
Proof.
have At : (A21 R)^T = A21 R by rewrite /A21 tr_diag_mx.
have A0 : A21 R *m e 0 = 2 *: e 0 by rewrite /A21 diag_mx_e mxE.
have A1 : A21 R *m e 1 = 1 *: e 1 by rewrite /A21 diag_mx_e mxE.
have s0 : sqnorm (2 *: (e 0 : 'cV[R]_2)) = 4.
  by rewrite sqnormZ sqnorm_e mulr1 -natrX.
split.
- by move=> k d; exact: is_derive_linear_coord.
- exact: A21_not_conformal.
- rewrite big1 => [|k _]; last exact: scaler0.
  rewrite addr0 coupledDE quad_congr quad1 At A0 A1 s0.
  by rewrite scale1r !sqnorm_e mulr1 divr1.
- by rewrite coupledDE quad1 A0 s0 sqnorm_e mulr1 divff // pnatr_eq0.
Qed.

(* the non-affine map φ(v) = v + v₀²·e_0: along the ray through e_0, φ(t e_0) = (t + t²) e_0 is not
   affine; at w' = e_0 its Jacobian is 1 + 2E₀₀ = diag(3, 1) and its second derivatives are
   K_0 = 2E₀₀, K_1 = 0; with g = e_0 and H = 0 the pulled-back D is 2/9 while D at φ(e_0) = 2e_0 is 0 *)
Definition phi_sq (v : V2) : V2 := v + (v 0 0 ^+ 2) *: e 0.
Definition J_sq (v : V2) : 'M[R]_2 := 1%:M + (2 * v 0 0) *: delta_mx 0 0.
Definition K_sq (k : 'I_2) : 'M[R]_2 := (2 * (e 0 : 'cV[R]_2) k 0) *: delta_mx 0 0.

Lemma map_ray_quadratic_instance :
  [/\ forall t : R, phi_sq (t *: e 0) = (t + t ^+ 2) *: e 0,
      coupledD (e 0) ((J_sq (e 0))^T *m e 0)
        ((J_sq (e 0))^T *m 0 *m J_sq (e 0) + \sum_k (e 0 : 'cV[R]_2) k 0 *: K_sq k) = 2 / 9
    & coupledD (phi_sq (e 0)) (e 0) 0 = 0].
Proof.
have e00 : (e 0 : 'cV[R]_2) 0 0 = 1 by rewrite e_entry.
split.
- by move=> t; rewrite /phi_sq mxE e00 mulr1 scalerDl.
- rewrite mulmx0 mul0mx add0r (bigD1 0) //= big1 => [|k k0]; last first.
    by rewrite e_entry (negbTE k0) /= scale0r.
  rewrite addr0 e00 scale1r coupledDE /K_sq e00 mulr1 quad_scale quad_delta e00 mulr1.
  have -> : (J_sq (e 0))^T *m e 0 = 3 *: e 0.
    rewrite /J_sq linearD /= trmx1 linearZ /= trmx_delta mulmxDl mul1mx -scalemxAl mul_delta_mx_cond.
    apply/matrixP => i j; rewrite !mxE (ord1 j) /=.
    by case: (i == 0); rewrite /= ?mulr1 ?mulr0 ?addr0 // -[3]/(1 + 2)%:R natrD.
  by rewrite sqnormZ sqnorm_e !mulr1 mul1r -natrX.
- by rewrite coupledDE /quad mul0mx dot0r !mul0r.
Qed.

End MapInstances.

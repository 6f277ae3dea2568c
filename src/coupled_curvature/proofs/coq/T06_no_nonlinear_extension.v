(* T6, the pointwise core, for every n.
   A reparameterization w = φ(w') of one block, at a point w', has Jacobian J (invertible),
   second-derivative matrices K_k = ∇²φ_k and value p = φ(w'); the new gradient and Hessian
   are g' = Jᵀg and H' = JᵀHJ + Σ_k g_k K_k.  If D is unchanged for every g ≠ 0 and every
   symmetric H (w' ≠ 0, p ≠ 0 so that D is defined), then
     (1) w'ᵀ K_k w' = 0 for every k,
     (2) J w' is parallel to p = φ(w'),
     (3) J Jᵀ = α² I with α > 0 (Jᵀ is conformal).
   J, K, w', p are free data: the statement holds for every choice, so in particular for the
   Jacobian, Hessians and value of any C² map at any point. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common.

Import Order.POrderTheory GRing.Theory Num.Theory.

Section Core.
Variable R : rcfType.
Variable n : nat.
Local Notation V := 'cV[R]_n.
Local Notation e := (@e R n).

Lemma addmx_entry m p (A B : 'M[R]_(m, p)) i j : (A + B) i j = A i j + B i j.
Proof. by rewrite mxE. Qed.
Lemma scalemx_entry m p (c : R) (A : 'M[R]_(m, p)) i j : (c *: A) i j = c * A i j.
Proof. by rewrite mxE. Qed.
Lemma trmx_entry m p (A : 'M[R]_(m, p)) i j : A^T i j = A j i.
Proof. by rewrite mxE. Qed.

Lemma col_entry (M : 'M[R]_n) i j : col j M i 0 = M i j.
Proof. by rewrite mxE. Qed.

Lemma sum_e (K : 'I_n -> 'M[R]_n) k :
  \sum_j e k j 0 *: K j = K k.
Proof.
rewrite (bigD1 k) //= big1 => [|j jk]; first by rewrite mxE !eqxx scale1r addr0.
by rewrite mxE (negbTE jk) scale0r.
Qed.

Lemma trmx_mul_e_neq0 (J : 'M[R]_n) (g : V) : J \in unitmx -> g != 0 -> J^T *m g != 0.
Proof.
move=> Ju g0; apply: contraNneq g0 => Jg0.
by rewrite -(mulKmx (_ : J^T \in unitmx) g) ?unitmx_tr // Jg0 mulmx0.
Qed.

Definition Dinv (J : 'M[R]_n) (K : 'I_n -> 'M[R]_n) (w' p : V) :=
  forall (g : V) (H : 'M[R]_n), g != 0 -> H^T = H ->
  coupledD w' (J^T *m g) (J^T *m H *m J + \sum_k g k 0 *: K k) = coupledD p g H.

Theorem pointwise_core (J : 'M[R]_n) (K : 'I_n -> 'M[R]_n) (w' p : V) :
  J \in unitmx -> w' != 0 -> p != 0 ->
  (forall (g : V) (H : 'M[R]_n), g != 0 -> H^T = H ->
     coupledD w' (J^T *m g) (J^T *m H *m J + \sum_k g k 0 *: K k) = coupledD p g H) ->
  [/\ forall k, quad (K k) w' = 0,
      exists lam : R, J *m w' = lam *: p &
      conformal J^T].
Proof.
move=> Ju w0 p0 DI.
have sw := sqnorm_gt0 w0; have sp := sqnorm_gt0 p0.
have sJg g : g != 0 -> 0 < sqnorm (J^T *m g) by move=> g0; apply/sqnorm_gt0/trmx_mul_e_neq0.
have e0 k : e k != 0.
  by apply/eqP => /matrixP /(_ k 0); rewrite !mxE !eqxx => /eqP; rewrite oner_eq0.
(* (1) H = 0 *)
have K0 k : quad (K k) w' = 0.
  have := DI (e k) (0 : 'M[R]_n) (e0 k) (trmx0 R n n).
  rewrite mulmx0 mul0mx add0r sum_e /coupledD /RQ /quad.
  have -> : dot p (0 *m p) = 0.
    rewrite dotE big1 // => i _; rewrite mxE big1 ?mulr0 // => j _.
    by rewrite mxE mul0r.
  rewrite !mul0r => /eqP; rewrite !mulf_eq0 !invr_eq0 (gt_eqF sw) (gt_eqF (sJg _ (e0 k))).
  by rewrite !orbF => /eqP.
have Ksum (g : V) : quad (\sum_k g k 0 *: K k) w' = 0.
  by rewrite quad_sum big1 // => k _; rewrite K0 mulr0.
(* the equation for every g, H once the K-term is gone *)
have E g H : g != 0 -> H^T = H ->
    quad H (J *m w') / sqnorm w' / sqnorm (J^T *m g) = quad H p / sqnorm p / sqnorm g.
  by move=> g0 HH; have := DI g H g0 HH; rewrite /coupledD /RQ quadD Ksum addr0 quad_congr.
set u := J *m w'.
have u0 : u != 0 by rewrite /u; apply: contraNneq w0 => uw; rewrite -(mulKmx Ju w') uw mulmx0.
have su := sqnorm_gt0 u0.
set c := sqnorm u / sqnorm w'.
have c0 : 0 < c by rewrite divr_gt0.
(* (3) H = I: ‖Jᵀg‖² = c ‖g‖² *)
have N g : sqnorm (J^T *m g) = c * sqnorm g.
  have s0 : sqnorm (0 : V) = 0 by apply/eqP; rewrite sqnorm_eq0.
  have [->|g0] := eqVneq g 0; first by rewrite mulmx0 s0 mulr0.
  have := E g 1%:M g0 (trmx1 _ _); rewrite !quad1 divff ?lt0r_neq0 // mul1r -/u -/c.
  move/(congr1 GRing.inv); rewrite invf_div invrK => <-.
  by rewrite mulrC divfK // lt0r_neq0.
have cdef : c = sqnorm u / sqnorm w' by [].
clearbody c.
set M := J *m J^T.
have MQ g : quad M g = c * sqnorm g.
  by rewrite /quad /M -N /sqnorm /dot trmx_mul trmxK !mulmxA.
have MT : M^T = M by rewrite /M trmx_mul trmxK.
have Mii i : M i i = c.
  have := MQ (e i); rewrite /quad mul_e /sqnorm dot_e_l dot_e_l.
  by rewrite [col _ _ _ _]mxE [e i i 0]mxE !eqxx mulr1.
have Mij i j : i != j -> M i j = 0.
  move=> ij; have := MQ (e i + e j).
  rewrite /quad mulmxDr !mul_e /sqnorm !dotDl !dotDr !dot_e_l !col_entry !e_entry.
  rewrite !eqxx (negbTE ij) eq_sym (negbTE ij) !Mii.
  have -> : M j i = M i j by rewrite -{1}MT trmx_entry.
  rewrite /= !addr0 !add0r mulrDr mulr1 [M i j + c]addrC addrACA.
  rewrite -[X in _ = X]addr0 => /addrI /eqP.
  by rewrite -mulr2n mulrn_eq0 /= => /eqP.
have HC : conformal J^T.
  exists (Num.sqrt c); split; first by rewrite sqrtr_gt0.
  rewrite trmxK -/M sqr_sqrtr ?ltW //; apply/matrixP => i j; rewrite [RHS]mxE.
  case: (eqVneq i j) => [->|ij]; first by rewrite Mii mulr1n.
  by rewrite mulr0n Mij.
(* (2) J w' ∥ p: quad H u · ‖p‖² = ‖u‖² · quad H p for every symmetric H *)
have [m pm] : exists m, p m 0 != 0.
  apply/existsP; apply: contraNT p0 => /existsPn P; apply/eqP/matrixP => i j.
  by rewrite ord1 mxE; apply/eqP; have := P i; rewrite negbK.
have Q H : H^T = H -> quad H u * sqnorm p = sqnorm u * quad H p.
  move=> HH; have := E (e m) H (e0 m) HH; rewrite -/u N.
  have se := sqnorm_gt0 (e0 m).
  have n1 := lt0r_neq0 su; have n2 := lt0r_neq0 sp; have n3 := lt0r_neq0 se;
    have n4 := lt0r_neq0 sw; have n5 := lt0r_neq0 c0.
  rewrite -!mulrA -!invfM => /eqP; rewrite eqr_div ?mulf_neq0 // => /eqP.
  have -> : sqnorm w' * (c * sqnorm (e m)) = sqnorm u * sqnorm (e m).
    by rewrite mulrA [sqnorm w' * c]mulrC cdef divfK.
  by rewrite !mulrA => /(mulIf n3) ->; rewrite mulrC.
have Qd i j : u i 0 * u j 0 * sqnorm p = sqnorm u * (p i 0 * p j 0).
  have HT : (delta_mx i j + delta_mx j i : 'M[R]_n)^T = delta_mx i j + delta_mx j i.
    by rewrite linearD /= !trmx_delta addrC.
  have := Q _ HT; rewrite !quadD !quad_delta => EE.
  have n2 : (2%:R : R) != 0 by rewrite pnatr_eq0.
  apply: (mulIf n2).
  transitivity ((u i 0 * u j 0 + u j 0 * u i 0) * sqnorm p); first by ring.
  by rewrite EE; ring.
have um : u m 0 != 0.
  apply: contraNneq pm => um0; have := Qd m m; rewrite um0 !mul0r => /esym /eqP.
  by rewrite mulf_eq0 (negbTE (lt0r_neq0 su)) /= mulf_eq0 orbb.
split => //.
  exists (sqnorm u * p m 0 / (sqnorm p * u m 0)); apply/matrixP => i b; rewrite ord1.
  rewrite scalemx_entry -/u; have n2 := lt0r_neq0 sp.
  apply: (mulIf (mulf_neq0 n2 um)); rewrite [RHS]mulrAC divfK ?mulf_neq0 //.
  rewrite [LHS](_ : _ = u i 0 * u m 0 * sqnorm p); last by ring.
  by rewrite Qd; ring.
Qed.

End Core.

(* non-vacuity: the identity reparameterization (J = I, K = 0, p = w') satisfies the
   invariance hypothesis of pointwise_core at every w' (and I is invertible: unitmx1) *)
Lemma pointwise_core_instance (R : rcfType) (n : nat) (w' : 'cV[R]_n) :
  Dinv 1%:M (fun _ => 0) w' w'.
Proof.
move=> g H _ _; rewrite trmx1 mul1mx mul1mx mulmx1 big1 ?addr0 // => k _.
exact: scaler0.
Qed.

(* T9, the network closed forms in gradient/Hessian form, as the SymPy derivation (derive_T9)
   states them.  For L(v) = Σ_{i<N} ℓ_i(F_i(v)) with outputs homogeneous of degree p along the
   ray through w for t near 1 (F_i(t·w) = t^p·F_i(w)) and f_i = F_i(w),
     P = Σ_i ⟨∇ℓ_i(f_i), f_i⟩   and   Q = Σ_i f_iᵀ∇²ℓ_i(f_i) f_i
   (grad/hess of DefsAnalytic: the coordinate partials), T9_closed_forms_grad gives
     wᵀg = p·P   and   wᵀHw = p(p − 1)·P + p²·Q
   (g = grad L w, H = hess L w), under local hypotheses only: each ℓ_i differentiable near f_i
   with its partials differentiable at f_i, and L differentiable near w with its partials
   differentiable at w.  It reuses T9_ray_closed_forms (whose hypotheses follow from those on ℓ_i:
   ray_derivable_near, d1_derivable), quad_hess (wᵀHw and f_iᵀ∇²ℓ_i f_i are second directional
   derivatives) and derive_grad (wᵀg and ⟨∇ℓ_i, f_i⟩ are first directional derivatives).
   T9_k1_closed_forms_grad is the case p = 1 with D = (Q/P²)·cos²∠(w, g) when P ≠ 0.
   Pinned instances, one sample and two weights, ℓ(f) = (f − 1)², every hypothesis proved:
   - T9_closed_forms_grad_instance: F(v) = v₀ + 2v₁ (p = 1) at w = (1, 1): f = 3, P = 12, Q = 18,
     wᵀg = 12, wᵀHw = 18;
   - T9_closed_forms_grad_instance_p2: F(v) = v₀·v₁ (p = 2) at w = (1, 2): f = 2, P = 4, Q = 8,
     wᵀg = 2P = 8, wᵀHw = 2·1·P + 4·Q = 40. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic T09_closed_forms.

Section Local.
Variable R : realType.
Variable m : nat.
Local Notation W := (matrix_normedModType R m 0).

Lemma near_scale1 (f : W) (P : W -> Prop) :
  (\forall y \near f, P y) -> \forall s \near (1 : R^o), P (s *: f).
Proof.
move=> HP; have C : (fun s : R^o => s *: f) @ (1 : R^o) --> f.
  have := @cvgZl _ _ _ (nbhs (1 : R^o)) _ (fun s : R^o => s) 1 f cvg_id.
  by rewrite scale1r; apply; exact: nbhs_filter.
exact: C.
Qed.

Lemma ray_derivable_near (ell : W -> R^o) (f : W) :
  differentiable_near ell f -> \forall s \near (1 : R^o), derivable ell (s *: f) f.
Proof.
move=> d; apply: (near_scale1 (P := fun y => derivable ell y f)).
by apply: (@filterS _ (nbhs f)) d => y dy; exact: diff_derivable.
Qed.

Lemma d1_derivable (ell : W -> R^o) (f : W) :
  differentiable_near ell f ->
  (forall j, differentiable (fun y : W => (d1 ell (e j) y : R^o)) f) ->
  derivable (fun y : W => (d1 ell f y : R^o)) f f.
Proof.
move=> dl dD.
pose G k : W -> R^o := f k 0 \*: (fun y : W => (d1 ell (e k) y : R^o)).
apply: (@derivable_near_eq _ _ (\sum_k G k)).
  apply: (@filterS _ (nbhs f)) dl => y dy; apply/esym.
  rewrite derive_grad // fct_sumE mxE.
  by apply: eq_bigr => k _; rewrite !mxE.
by apply: derivable_sum => k; apply/derivableZ/diff_derivable/dD.
Qed.

Lemma d1_dot_grad (ell : W -> R^o) (f : W) :
  differentiable ell f -> d1 ell f f = dot (grad ell f) f.
Proof.
move=> d; rewrite derive_grad // /dot !mxE; apply: eq_bigr => k _.
by rewrite !mxE mulrC.
Qed.
End Local.

Section Network.
Variable R : realType.
Variables n m N : nat.
Local Notation V := (matrix_normedModType R n 0).
Local Notation W := (matrix_normedModType R m 0).

Theorem T9_closed_forms_grad (p : nat) (F : 'I_N -> V -> W) (ell : 'I_N -> W -> R^o) (w : V) :
  let L := fun v : V => \sum_(i < N) ell i (F i v) in
  let P := \sum_(i < N) dot (grad (ell i) (F i w)) (F i w) in
  let Q := \sum_(i < N) quad (hess (ell i) (F i w)) (F i w) in
  (forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ p *: F i w) ->
  (forall i, differentiable_near (ell i) (F i w)) ->
  (forall i j, differentiable (fun y : W => (d1 (ell i) (e j) y : R^o)) (F i w)) ->
  differentiable_near L w ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) w) ->
  dot w (grad L w) = p%:R * P /\
  quad (hess L w) w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q.
Proof.
move=> L P Q hom dl dD dL dLD.
have d1l i := ray_derivable_near (dl i).
have d2l i := d1_derivable (dl i) (dD i).
have [E1 E2] := T9_ray_closed_forms hom d1l d2l.
have EP : \sum_(i < N) d1 (ell i) (F i w) (F i w) = P.
  by apply: eq_bigr => i _; rewrite d1_dot_grad //; exact: nbhs_singleton (dl i).
have EQ : \sum_(i < N) d2 (ell i) (F i w) (F i w) (F i w) = Q.
  by apply: eq_bigr => i _; rewrite quad_hess.
split.
  rewrite /dot -derive_grad; last exact: (nbhs_singleton dL).
  by rewrite -/(d1 L w w) E1 EP.
by rewrite quad_hess // E2 EP EQ.
Qed.

(* k = 1 (p = 1), in gradient/Hessian form: wᵀg = Σ⟨∇ℓ_i, f_i⟩, wᵀHw = Σ f_iᵀ∇²ℓ_i f_i and
   D = (Q/P²)·cos²∠(w, g) *)
Theorem T9_k1_closed_forms_grad (F : 'I_N -> V -> W) (ell : 'I_N -> W -> R^o) (w : V) :
  let L := fun v : V => \sum_(i < N) ell i (F i v) in
  let P := \sum_(i < N) dot (grad (ell i) (F i w)) (F i w) in
  let Q := \sum_(i < N) quad (hess (ell i) (F i w)) (F i w) in
  (forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 1 *: F i w) ->
  (forall i, differentiable_near (ell i) (F i w)) ->
  (forall i j, differentiable (fun y : W => (d1 (ell i) (e j) y : R^o)) (F i w)) ->
  differentiable_near L w ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) w) ->
  P != 0 ->
  [/\ dot w (grad L w) = P, quad (hess L w) w = Q &
      coupledD w (grad L w) (hess L w)
      = Q / P ^+ 2 * (dot w (grad L w) ^+ 2 / (sqnorm w * sqnorm (grad L w)))].
Proof.
move=> L P Q hom dl dD dL dLD P0.
have [E1 E2] := T9_closed_forms_grad hom dl dD dL dLD.
have wg : dot w (grad L w) = P by rewrite E1 mul1r.
have wHw : quad (hess L w) w = Q by rewrite E2 subrr mulr0 mul0r add0r expr1n mul1r.
split => //; rewrite /coupledD /RQ wHw wg.
have P2 : P ^+ 2 != 0 by rewrite expf_neq0.
by rewrite [RHS]mulrA -[Q / P ^+ 2 * P ^+ 2]mulrA mulVf // mulr1 invfM mulrA.
Qed.
End Network.

(* ---- helpers for the instances: squares of everywhere-differentiable functions ---- *)
Section Square.
Variable R : realType.
Variable n : nat.
Local Notation U := (matrix_normedModType R n 0).

Definition crd (k : 'I_n.+1) : U -> R^o := fun y => y k 0.

Lemma crd_diff k (y : U) : differentiable (crd k) y.
Proof. exact: differentiable_coord. Qed.

Lemma crd_d1 k j : (fun y : U => (d1 (crd k) (e j) y : R^o)) = cst (k == j)%:R.
Proof. by apply/funext => y; rewrite /d1 derive_coord. Qed.

Lemma cst_d1 (a : R) v : (fun y : U => (d1 (cst (a : R^o)) v y : R^o)) = cst 0.
Proof. by apply/funext => y; rewrite /d1 derive_val. Qed.

Lemma sq_diff (g : U -> R^o) (x : U) : (forall y, differentiable g y) -> differentiable (g * g) x.
Proof. by move=> dg; apply: differentiableM. Qed.

Lemma sq_d1 (g : U -> R^o) (v : U) : (forall y, differentiable g y) ->
  (fun y : U => (d1 (g * g) v y : R^o))
  = g * (fun y : U => (d1 g v y : R^o)) + g * (fun y : U => (d1 g v y : R^o)).
Proof.
by move=> dg; apply/funext => y; rewrite /d1 deriveM; try exact/diff_derivable.
Qed.

Lemma sq_d1_diff (g : U -> R^o) (v x : U) : (forall y, differentiable g y) ->
  differentiable (fun y : U => (d1 g v y : R^o)) x ->
  differentiable (fun y : U => (d1 (g * g) v y : R^o)) x.
Proof.
by move=> dg dd; rewrite sq_d1 //; apply: differentiableD; apply: differentiableM.
Qed.

Lemma sq_d2 (g : U -> R^o) (u v x : U) : (forall y, differentiable g y) ->
  differentiable (fun y : U => (d1 g v y : R^o)) x ->
  d2 (g * g) u v x = 2%:R * (g x * d2 g u v x + d1 g u x * d1 g v x).
Proof.
move=> dg dd; rewrite /d2 sq_d1 // deriveD; try exact/derivableM/diff_derivable/dd/diff_derivable.
rewrite deriveM; try exact/diff_derivable. rewrite -!/(d1 g u x) -/(d2 g u v x) /=.
rewrite !regular_scaleE; ring.
Qed.

Lemma sq_near (g : U -> R^o) (x : U) : (forall y, differentiable g y) -> differentiable_near (g * g) x.
Proof. by move=> dg; rewrite /differentiable_near; near=> y; exact: sq_diff. Unshelve. all: by end_near. Qed.
End Square.

(* ---- the per-sample squared loss ℓ(f) = (f − y)² of one output ---- *)
Section SqLoss.
Variable R : realType.
Local Notation W1 := (matrix_normedModType R 0 0).

Definition lh (y : R) : W1 -> R^o := crd 0 - cst y.

Lemma lh_diff y (f : W1) : differentiable (lh y) f.
Proof. by apply: differentiableB; [exact: crd_diff | exact: differentiable_cst]. Qed.

Lemma lh_d1 y : (fun f : W1 => (d1 (lh y) (e 0) f : R^o)) = cst 1.
Proof.
apply/funext => f; rewrite /d1 deriveB; last exact: derivable_cst.
  by rewrite derive_coord derive_val subr0.
exact/diff_derivable/crd_diff.
Qed.

Lemma lh_d1_diff y (f : W1) : differentiable (fun f : W1 => (d1 (lh y) (e 0) f : R^o)) f.
Proof. by rewrite lh_d1; exact: differentiable_cst. Qed.

Lemma sqloss_E y : (fun f : W1 => (f 0 0 - y) ^+ 2 : R^o) = lh y * lh y.
Proof. by apply/funext => f; rewrite expr2. Qed.

Lemma sqloss_hyps y (f : W1) :
  differentiable_near (lh y * lh y) f /\
  (forall j, differentiable (fun g : W1 => (d1 (lh y * lh y) (e j) g : R^o)) f).
Proof.
split; first exact/sq_near/lh_diff.
by move=> j; rewrite (ord1 j); apply: sq_d1_diff; [exact: lh_diff | exact: lh_d1_diff].
Qed.

(* ⟨∇ℓ(f), f⟩ = 2(f − y)·f and fᵀ∇²ℓ(f) f = 2f² *)
Lemma sqloss_P y (f : W1) : dot (grad (lh y * lh y) f) f = 2%:R * (f 0 0 - y) * f 0 0.
Proof.
rewrite /dot mxE big_ord1 !mxE.
have := congr1 (fun h => h f) (sq_d1 (e 0) (@lh_diff y)); rewrite /= => ->.
rewrite lh_d1; change (((f 0 0 - y) * 1 + (f 0 0 - y) * 1) * f 0 0 = 2%:R * (f 0 0 - y) * f 0 0).
by ring.
Qed.

Lemma sqloss_Q y (f : W1) : quad (hess (lh y * lh y) f) f = 2%:R * f 0 0 ^+ 2.
Proof.
rewrite /quad /dot mxE big_ord1 !mxE big_ord1 !mxE.
rewrite sq_d2; [|exact: lh_diff|exact: lh_d1_diff].
have -> : d2 (lh y) (e 0) (e 0) f = 0 by rewrite /d2 lh_d1 derive_val.
have -> : d1 (lh y) (e 0) f = 1 by have := congr1 (fun h => h f) (lh_d1 y).
by rewrite mulr0 add0r !mulr1 expr2 mulrCA.
Qed.
End SqLoss.

(* ---- the pinned instances ---- *)
Ltac diff_tac := repeat first [exact: crd_diff | exact: differentiable_cst | apply: differentiableB
  | apply: differentiableD | apply: differentiableN | apply: differentiableZ | apply: differentiableM].

Section Instances.
Variable R : realType.
Local Notation V2 := (matrix_normedModType R 1 0).
Local Notation W1 := (matrix_normedModType R 0 0).

(* p = 1: the residual v₀ + 2v₁ − 1 of the linear output F(v) = v₀ + 2v₁ against the target 1 *)
Definition g1 : V2 -> R^o := crd 0 + 2%:R \*: crd 1 - cst 1.

Lemma g1_diff (y : V2) : differentiable g1 y.
Proof. by rewrite /g1; diff_tac. Qed.

Lemma g1_d1_diff j (x : V2) : differentiable (fun y : V2 => (d1 g1 (e j) y : R^o)) x.
Proof.
have -> : (fun y : V2 => (d1 g1 (e j) y : R^o)) = cst ((0 == j)%:R + 2%:R * (1 == j)%:R : R^o).
  apply/funext => y; rewrite /d1 /g1 deriveB; try by apply/diff_derivable; diff_tac.
  rewrite deriveD; try by apply/diff_derivable; diff_tac.
  rewrite deriveZ; try by apply/diff_derivable; diff_tac.
  by rewrite !derive_coord derive_val subr0.
exact: differentiable_cst.
Qed.

(* p = 2: the residual v₀v₁ − 1 of the product output F(v) = v₀·v₁ against the target 1 *)
Definition g2 : V2 -> R^o := crd 0 * crd 1 - cst 1.

Lemma g2_diff (y : V2) : differentiable g2 y.
Proof. by rewrite /g2; diff_tac. Qed.

Lemma g2_d1_diff j (x : V2) : differentiable (fun y : V2 => (d1 g2 (e j) y : R^o)) x.
Proof.
have -> : (fun y : V2 => (d1 g2 (e j) y : R^o))
          = crd 0 * cst ((1 == j)%:R : R^o) + crd 1 * cst ((0 == j)%:R : R^o).
  apply/funext => y; rewrite /d1 /g2 deriveB; try by apply/diff_derivable; diff_tac.
  rewrite deriveM; try by apply/diff_derivable; diff_tac.
  by rewrite !derive_coord derive_val subr0.
by diff_tac.
Qed.

(* one sample, two weights, F(v) = v₀ + 2v₁ (p = 1), ℓ(f) = (f − 1)², at w = (1, 1): f = 3,
   every hypothesis of T9_closed_forms_grad holds, P = ⟨∇ℓ(f), f⟩ = 12, Q = fᵀ∇²ℓ(f) f = 18,
   so wᵀg = 12 and wᵀHw = 18 *)
Theorem T9_closed_forms_grad_instance :
  let F : 'I_1 -> V2 -> W1 := fun _ v => const_mx (v 0 0 + 2%:R * v 1 0) in
  let ell : 'I_1 -> W1 -> R^o := fun _ f => (f 0 0 - 1) ^+ 2 in
  let w : V2 := const_mx 1 in
  let L := fun v : V2 => \sum_(i < 1) ell i (F i v) in
  [/\ forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 1 *: F i w,
      (forall i, differentiable_near (ell i) (F i w)) /\
      (forall i j, differentiable (fun y => (d1 (ell i) (e j) y : R^o)) (F i w)),
      differentiable_near L w /\ (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w),
      \sum_(i < 1) dot (grad (ell i) (F i w)) (F i w) = 12%:R /\
      \sum_(i < 1) quad (hess (ell i) (F i w)) (F i w) = 18%:R &
      dot w (grad L w) = 12%:R /\ quad (hess L w) w = 18%:R].
Proof.
move=> F ell w L.
have Eell i : ell i = lh 1 * lh 1 by exact: sqloss_E.
have EL : L = g1 * g1.
  by apply/funext => v; rewrite /L big_ord1 /ell /F mxE expr2.
have hom : forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 1 *: F i w.
  move=> i; apply: (@nearW _ _ _ (@nbhs_pfilter [topologicalType of R^o] 1)) => t.
  by apply/matrixP => a b; rewrite !mxE; ring.
have hl : (forall i, differentiable_near (ell i) (F i w)) /\
          (forall i j, differentiable (fun y => (d1 (ell i) (e j) y : R^o)) (F i w)).
  by split=> i; rewrite Eell; have [] := sqloss_hyps 1 (F i w).
have hL : differentiable_near L w /\ (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w).
  rewrite EL; split; first exact/sq_near/g1_diff.
  by move=> j; apply: sq_d1_diff; [exact: g1_diff | exact: g1_d1_diff].
have Fw : F 0 w 0 0 = 3%:R by rewrite /F /w !mxE; ring.
have HP : \sum_(i < 1) dot (grad (ell i) (F i w)) (F i w) = 12%:R.
  by rewrite big_ord1 Eell sqloss_P Fw; ring.
have HQ : \sum_(i < 1) quad (hess (ell i) (F i w)) (F i w) = 18%:R.
  by rewrite big_ord1 Eell sqloss_Q Fw; ring.
have [E1 E2] := T9_closed_forms_grad hom hl.1 hl.2 hL.1 hL.2.
split => //; split.
  by rewrite E1 HP mul1r.
by rewrite E2 HP HQ; ring.
Qed.

(* one sample, two weights, the product output F(v) = v₀·v₁ (homogeneous of degree p = 2 along
   every ray), ℓ(f) = (f − 1)², at w = (1, 2): f = 2, every hypothesis of T9_closed_forms_grad
   holds with p = 2, P = 4, Q = 8, so wᵀg = 2P = 8 and wᵀHw = 2·1·P + 2²·Q = 40 *)
Theorem T9_closed_forms_grad_instance_p2 :
  let F : 'I_1 -> V2 -> W1 := fun _ v => const_mx (v 0 0 * v 1 0) in
  let ell : 'I_1 -> W1 -> R^o := fun _ f => (f 0 0 - 1) ^+ 2 in
  let w : V2 := \col_k (k.+1)%:R in
  let L := fun v : V2 => \sum_(i < 1) ell i (F i v) in
  [/\ forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 2 *: F i w,
      (forall i, differentiable_near (ell i) (F i w)) /\
      (forall i j, differentiable (fun y => (d1 (ell i) (e j) y : R^o)) (F i w)),
      differentiable_near L w /\ (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w),
      \sum_(i < 1) dot (grad (ell i) (F i w)) (F i w) = 4%:R /\
      \sum_(i < 1) quad (hess (ell i) (F i w)) (F i w) = 8%:R &
      dot w (grad L w) = 8%:R /\ quad (hess L w) w = 40%:R].
Proof.
move=> F ell w L.
have Eell i : ell i = lh 1 * lh 1 by exact: sqloss_E.
have EL : L = g2 * g2.
  by apply/funext => v; rewrite /L big_ord1 /ell /F mxE expr2.
have hom : forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 2 *: F i w.
  move=> i; apply: (@nearW _ _ _ (@nbhs_pfilter [topologicalType of R^o] 1)) => t.
  by apply/matrixP => a b; rewrite !mxE; ring.
have hl : (forall i, differentiable_near (ell i) (F i w)) /\
          (forall i j, differentiable (fun y => (d1 (ell i) (e j) y : R^o)) (F i w)).
  by split=> i; rewrite Eell; have [] := sqloss_hyps 1 (F i w).
have hL : differentiable_near L w /\ (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w).
  rewrite EL; split; first exact/sq_near/g2_diff.
  by move=> j; apply: sq_d1_diff; [exact: g2_diff | exact: g2_d1_diff].
have Fw : F 0 w 0 0 = 2%:R.
  by rewrite /F /w !mxE mul1r.
have HP : \sum_(i < 1) dot (grad (ell i) (F i w)) (F i w) = 4%:R.
  by rewrite big_ord1 Eell sqloss_P Fw; ring.
have HQ : \sum_(i < 1) quad (hess (ell i) (F i w)) (F i w) = 8%:R.
  by rewrite big_ord1 Eell sqloss_Q Fw; ring.
have [E1 E2] := T9_closed_forms_grad hom hl.1 hl.2 hL.1 hL.2.
split => //; split.
  by rewrite E1 HP; ring.
by rewrite E2 HP HQ; ring.
Qed.
End Instances.

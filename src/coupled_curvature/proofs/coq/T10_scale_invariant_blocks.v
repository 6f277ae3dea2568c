(* T10: scale-invariant blocks.  If L(s·x) = L(x) for every s > 0 (a weight block followed
   by batch-statistics normalization), then at a point w
     wᵀg = 0  (the radial derivative vanishes; no differentiability needed for d1 L w w = 0;
               wᵀ grad L w = 0 needs L differentiable at w)
     H w = -g (H the Hessian of coordinate second derivatives, H_ij = ∂_i ∂_j L), when L is
              differentiable NEAR w and its partial derivatives are derivable at w
   hence wᵀHw = 0 and D = 0: invariant and uninformative.  The hypotheses are local: a
   scale-invariant loss is never differentiable at 0 unless constant, so none is global.
   The derivatives are those of T01_analytic (mathcomp-analysis' derive).  The pinned instance
   T10_instance is L(x) = x₀²/(x₀² + x₁²) at w = (1, 1): scale invariant, not constant, every
   hypothesis holds there and g₀ = 1/2 <> 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic.

Section T10.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Definition scale_invariant (L : V -> R^o) :=
  forall (s : R) (x : V), 0 < s -> L (s *: x) = L x.

(* wᵀg = 0 in directional form: the derivative of L at w along w is 0 *)
Theorem scale_invariant_radial (L : V -> R^o) (w : V) :
  scale_invariant L -> d1 L w w = 0.
Proof.
move=> SI; rewrite /d1 /derive /=; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: (near0_gt1 R); apply: filterS => h h1.
have -> : h *: w + w = (h + 1) *: w by rewrite scalerDl scale1r.
by rewrite SI // subrr scaler0.
Qed.

Corollary scale_invariant_wg (L : V -> R^o) (w : V) :
  scale_invariant L -> differentiable L w -> dot w (grad L w) = 0.
Proof.
by move=> SI dL; rewrite /dot -derive_grad // scale_invariant_radial.
Qed.

(* H w = -g, with H = hess L w (H_ij = ∂_i ∂_j L), g = grad L w *)
Theorem scale_invariant_Hw (L : V -> R^o) (w : V) :
  scale_invariant L -> differentiable_near L w -> partials_derivable L w ->
  hess L w *m w = - grad L w.
Proof.
move=> SI dL dD; apply/matrixP => i b; rewrite ord1.
have := derive_radial i dL dD.
have -> : (fun y : V => (d1 L y y : R^o)) = cst 0.
  by apply/funext => y; rewrite scale_invariant_radial.
by rewrite derive_val => /esym/eqP; rewrite addr_eq0 => /eqP ->; rewrite [RHS]mxE.
Qed.

(* hence wᵀHw = 0 and D = 0 *)
Corollary scale_invariant_quad (L : V -> R^o) (w : V) :
  scale_invariant L ->
  differentiable_near L w -> partials_derivable L w ->
  quad (hess L w) w = 0 /\ coupledD w (grad L w) (hess L w) = 0.
Proof.
move=> SI dL dD; have Q : quad (hess L w) w = 0.
  rewrite /quad scale_invariant_Hw // /dot mulmxN mxE.
  by have := scale_invariant_wg SI (nbhs_singleton dL); rewrite /dot => ->; rewrite oppr0.
by split=> //; rewrite /coupledD /RQ Q !mul0r.
Qed.

End T10.

(* ---- the pinned instance: L(x) = x₀²/(x₀² + x₁²) at w = (1, 1) ---- *)
Section T10Instance.
Variable R : realType.
Local Notation V := (matrix_normedModType R 1 0).

Definition si_c (k : 'I_2) (y : V) : R^o := y k 0.
Definition si_N : V -> R^o := si_c 0 * si_c 0.
Definition si_S : V -> R^o := si_c 0 * si_c 0 + si_c 1 * si_c 1.
Definition si_L : V -> R^o := si_N * (fun y => (si_S y)^-1).
Definition si_w : V := const_mx 1.

(* the partial derivatives of N and S along e_j, as mathcomp-analysis' deriveM/deriveD give them *)
Definition si_dc (k j : 'I_2) : V -> R^o := cst (k == j)%:R.
Definition si_dN (j : 'I_2) : V -> R^o := si_c 0 * si_dc 0 j + si_c 0 * si_dc 0 j.
Definition si_dS (j : 'I_2) : V -> R^o :=
  (si_c 0 * si_dc 0 j + si_c 0 * si_dc 0 j) + (si_c 1 * si_dc 1 j + si_c 1 * si_dc 1 j).
Definition si_F (j : 'I_2) : V -> R^o :=
  si_N * (- ((fun y => (si_S y)^-1) * (fun y => (si_S y)^-1)) * si_dS j)
  + (fun y => (si_S y)^-1) * si_dN j.

Lemma si_LE (y : V) :
  si_L y = y 0 0 * y 0 0 * (y 0 0 * y 0 0 + y 1 0 * y 1 0)^-1.
Proof. by []. Qed.

Lemma si_SE (y : V) : si_S y = y 0 0 * y 0 0 + y 1 0 * y 1 0.
Proof. by []. Qed.

Lemma si_NE (y : V) : si_N y = y 0 0 * y 0 0.
Proof. by []. Qed.

Lemma si_dNE j (y : V) : si_dN j y = y 0 0 * (0 == j)%:R + y 0 0 * (0 == j)%:R.
Proof. by []. Qed.

Lemma si_dSE j (y : V) :
  si_dS j y = (y 0 0 * (0 == j)%:R + y 0 0 * (0 == j)%:R)
              + (y 1 0 * (1 == j)%:R + y 1 0 * (1 == j)%:R).
Proof. by []. Qed.

Lemma si_scale : scale_invariant si_L.
Proof.
move=> s x s0; rewrite !si_LE !mxE.
have E a : s * a * (s * a) = (s * s) * (a * a) by rewrite mulrACA.
rewrite !E -mulrDr invfM mulrACA mulfV ?mul1r //.
by rewrite mulf_neq0 // lt0r_neq0.
Qed.

Lemma si_c_diff k (y : V) : differentiable (si_c k) y.
Proof. exact: differentiable_coord. Qed.

Lemma si_dc_diff k j (y : V) : differentiable (si_dc k j) y.
Proof. exact: differentiable_cst. Qed.

Lemma si_N_diff (y : V) : differentiable si_N y.
Proof. by apply: differentiableM; exact: si_c_diff. Qed.

Lemma si_S_diff (y : V) : differentiable si_S y.
Proof. by apply: differentiableD; apply: differentiableM; exact: si_c_diff. Qed.

Lemma si_dN_diff j (y : V) : differentiable (si_dN j) y.
Proof.
by apply: differentiableD; apply: differentiableM; first [exact: si_c_diff | exact: si_dc_diff].
Qed.

Lemma si_dS_diff j (y : V) : differentiable (si_dS j) y.
Proof.
by apply: differentiableD; apply: differentiableD; apply: differentiableM;
  first [exact: si_c_diff | exact: si_dc_diff].
Qed.

Lemma si_Sinv_diff (y : V) : si_S y != 0 -> differentiable (fun y => (si_S y)^-1) y.
Proof. by move=> Sy; apply: differentiableV => //; exact: si_S_diff. Qed.

Lemma si_S_near : \forall y \near si_w, si_S y != 0.
Proof.
have C : si_S @ si_w --> si_S si_w := differentiable_continuous (si_S_diff si_w).
apply: (@cvgr_neq0 R [pseudoMetricNormedZmodType R of R^o] V (nbhs si_w) _ si_S (si_S si_w) C).
by rewrite si_SE /si_w !mxE mulr1 -[1 + 1]/(2%:R : R) pnatr_eq0.
Qed.

Lemma si_c_der k j (y : V) : derive (si_c k) y (e j) = si_dc k j y.
Proof. exact: derive_coord. Qed.

Lemma si_N_der j (y : V) : derive si_N y (e j) = si_dN j y.
Proof.
rewrite deriveM; try exact/diff_derivable/si_c_diff.
by rewrite !si_c_der !regular_scaleE.
Qed.

Lemma si_S_der j (y : V) : derive si_S y (e j) = si_dS j y.
Proof.
rewrite deriveD; try by apply/diff_derivable; apply: differentiableM; exact: si_c_diff.
rewrite !deriveM; try exact/diff_derivable/si_c_diff.
by rewrite !si_c_der !regular_scaleE.
Qed.

Lemma si_d1 j : \forall y \near si_w, (d1 si_L (e j) y : R^o) = si_F j y.
Proof.
apply: (@filterS _ (nbhs si_w)) si_S_near => y Sy.
rewrite /d1 /si_L deriveM; last by apply/diff_derivable/si_Sinv_diff.
  rewrite deriveV //; last exact/diff_derivable/si_S_diff.
  rewrite si_N_der si_S_der !regular_scaleE /si_F /=.
  by rewrite -exprVn expr2.
exact/diff_derivable/si_N_diff.
Qed.

Lemma si_F_diff j : differentiable (si_F j) si_w.
Proof.
have Sw := nbhs_singleton si_S_near.
apply: differentiableD; apply: differentiableM.
- exact: si_N_diff.
- apply: differentiableM; last exact: si_dS_diff.
  by apply: differentiableN; apply: differentiableM; exact: si_Sinv_diff.
- exact: si_Sinv_diff.
- exact: si_dN_diff.
Qed.

(* the instance: scale invariant, differentiable near w, partials derivable at w, and
   g₀ = ∂₀L(w) = 1/2 <> 0 (so L is not constant near w) *)
Theorem T10_instance :
  let L := fun y : matrix_normedModType R 1 0 =>
    (y 0 0 ^+ 2 / (y 0 0 ^+ 2 + y 1 0 ^+ 2) : R^o) in
  let w : matrix_normedModType R 1 0 := const_mx 1 in
  [/\ scale_invariant L, differentiable_near L w,
      partials_derivable L w &
      grad L w 0 0 = 2%:R^-1].
Proof.
move=> L w; have -> : L = si_L by apply/funext => y; rewrite /L si_LE !expr2.
have -> : w = si_w by [].
split.
- exact: si_scale.
- rewrite /differentiable_near; apply: (@filterS _ (nbhs si_w)) si_S_near => y Sy.
  apply: differentiableM; first exact: si_N_diff.
  exact: si_Sinv_diff.
- move=> i j; apply: (derivable_near_eq (f := si_F j)).
    by apply: (@filterS _ (nbhs si_w)) (si_d1 j) => y ->.
  exact/diff_derivable/si_F_diff.
- rewrite mxE (nbhs_singleton (si_d1 0)).
  change (si_N si_w * (- ((si_S si_w)^-1 * (si_S si_w)^-1) * si_dS 0 si_w)
          + (si_S si_w)^-1 * si_dN 0 si_w = 2%:R^-1).
  rewrite si_NE si_SE si_dSE si_dNE !mxE /= !mul1r.
  rewrite -[1 + 1]/(2%:R : R).
  have t0 : (2%:R : R) != 0 by rewrite pnatr_eq0.
  by field.
Qed.

End T10Instance.
